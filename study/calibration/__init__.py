"""A protocol calibrated from a pilot: reference speeds, sampling ranges, FEA bounds."""
