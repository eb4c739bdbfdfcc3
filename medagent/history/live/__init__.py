"""Live interviews over HTTP: a person plays the patient, one request per answer."""
