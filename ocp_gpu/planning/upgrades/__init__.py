"""Driver upgrade decisions: the state machine as one table, the budget, and what a pass does
on each node.  Pure."""
