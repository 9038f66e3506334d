"""Models of people: how fast a person decorates, and where a protocol measures them."""
