"""Task heads on real user text: the CLINC150 banking question read with hidden states (`collect.py`) and its
learning curve, zero-shot against calibration, head and the task that chooses (`analyse.py`)."""
