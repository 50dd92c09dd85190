"""Operand rendering: one module per operand with its own template context, and the
mechanism that renders every operand alike."""
