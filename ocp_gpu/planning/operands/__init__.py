"""Operand decisions (every operand but the driver): deploy labels, the device plugin's
config, MIG, monitoring, the validator's verdicts, taking objects over.  Pure."""
