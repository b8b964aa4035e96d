"""The MIG controller: a ServingPlan's MIG layouts as mig-parted node labels, applied node by
node in the planner's order without taking a service below its floor (see :mod:`.steps`)."""
