"""`fast-dqn suite`: games × seeds of one protocol, each an ordinary run directory, run K at a
time on this machine or as tasks on a Ray cluster, resumed as a whole by the same command."""
