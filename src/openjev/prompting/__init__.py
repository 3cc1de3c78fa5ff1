"""The prompting stage: from a validated request to token ids.

`prompts` turns a state and its questions into the model's own chat template (caller text quoted so it
stays text); `conversation_memo` remembers rendered conversations so one asked again, or extended, is
not rendered again; `tokenizer`, `tokenizer_source`, `encoding` and `fast_bpe` turn text into ids (each
distinct piece once per process); `labels` picks single-token answer labels; `prompt_ids` joins a shared
prefix with each question's suffix without copying it; `budget` holds the token limits every prompt must
keep; `vision` and `image_marks` put each image's vision span where its placeholder stands, with its
exact token count; `box_grammar` is the language a box answer is generated in. It may import `request`
and the foundation modules, never a backend or a later stage.
"""
