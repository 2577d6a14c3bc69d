"""The data model every room speaks.

Families, samples, metric types, names and number text. Imports nothing but the standard
library; everything else imports it.
"""
