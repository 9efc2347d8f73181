"""The policy documents and the limits they set: namespace and topic policies, namespace
limits, dispatch rates, unacked-message limits, the default namespace and the stored record of
a terminated topic; bounded.py says what they read of the rooms above."""
