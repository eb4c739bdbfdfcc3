"""The case's facts: atomic findings the real patient stated, each resting on the patient's own words."""
