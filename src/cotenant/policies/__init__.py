"""Pure decisions: a snapshot of the cluster in, a decision out, no I/O and no hidden state."""
