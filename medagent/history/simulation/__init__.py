"""The simulated patient grounded in one real interview, and the reference cut out of that interview
(the physician's closing statement, which the patient and the agents never see)."""
