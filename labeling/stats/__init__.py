"""Statistics: agreement coefficients, design-based estimates, humans against machines."""
