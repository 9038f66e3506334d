"""What leaves the database: tidy tables with their codebook, bulk bonus files."""
