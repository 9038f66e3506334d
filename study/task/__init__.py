"""The bakery's task: what a finished cookie is, a decorator's pace, a theme's readable
colours.
"""
