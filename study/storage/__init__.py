"""The study database: SQLite with one transaction per event, a disk that refuses writes,
checked backups.
"""
