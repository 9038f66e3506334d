"""Helpers the tests share: imported as ``support.<concern>``, never from another test module."""
