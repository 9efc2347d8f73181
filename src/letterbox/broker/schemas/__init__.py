"""The schema registry of each topic and Avro schema resolution."""
