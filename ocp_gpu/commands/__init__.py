"""one module per CLI subcommand: the `ocp-gpu` tools for admins, beside the operator itself.

Each module offers `add_arguments(parser)` and `main(args) -> exit status`; cli.py
only wires them.  They read, plan and render through the same functions the
operator uses, so what a command shows is what the operator does.
"""
