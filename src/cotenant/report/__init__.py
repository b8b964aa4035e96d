"""Reports: terminal tables, PNG plots and an HTML page over experiment results."""
