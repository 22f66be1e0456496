"""The fast player's learned evaluation, trained in generations from the alpha-beta's own games."""
