"""Files shipped inside the package: the default contract (a link to config/aliases.yaml)."""
