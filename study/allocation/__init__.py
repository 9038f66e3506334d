"""The allocation model and its solver: teams, states, metrics, goal rewards, algorithms as
data, optimal policies.
"""
