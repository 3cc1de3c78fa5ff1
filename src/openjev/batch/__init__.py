"""Work over a user's own labelled files against any Jev server: `openjev eval` and `openjev classify`."""
