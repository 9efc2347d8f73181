"""Namespace and topic policies and the limits they set: backlog quota, inactive topics,
dispatch rate, unacked limits, termination, the default namespace."""
