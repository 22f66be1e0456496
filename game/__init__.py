"""The rules of English checkers (and a 6x6 training board), notation, and network encoding."""
