"""The answering stage: from label logprobs to typed answers and their corrections.

`answers` holds the pure maths (renormalising, rotations, confidences, the typed answers); `readouts`
decides how each question type is shown and read (views, labels, cues) and combines its readouts;
`debias` and `content_free` are contextual calibration (a readout of the question over a content-free
state, divided out); `thinking` is the thinking tier's escalation of unsure questions; `boxes` reads a
box's edges from the digits generated and their logprobs, and `box_reading` makes a box question's
constrained generation and reads it so. It may import `prompting`, `request`, the
backend protocol (`backends.base`) and the foundation modules; only the engine and above import it. The
calibration file's format (`calibration`) sits with the foundation modules because the settings check it
at start-up.
"""
