"""Tools built on the session and the engine: dump, compare (metrics, references, lockstep),
profile, value injection, repeated runs, tensor views. The core never imports them."""
