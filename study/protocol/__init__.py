"""A study protocol: loading its TOML, the schema, checks between parts, the page's texts,
recruitment and condition orders.
"""
