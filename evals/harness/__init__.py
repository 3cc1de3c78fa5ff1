"""The shared harness: asking a Jev `/v1/systemone`, run directories, reports, metrics, comparisons, calibration.

It owns what every suite shares: the suite registry (`registry`: a suite registers its name, its
loader, its runner, its report writer and its offline variants), vendored data checked on load
(`data`), the HTTP client with its retries (`transport`), run directories and sessions (`runs`),
the metrics (`metrics`), the command lines `run`, `report`, `compare` and `calibrate`, and the
variant record contract (`variants`). It imports `openjev` and third-party packages, never a suite
package (`evals.mmlu`, `evals.jev_dev`); suites import it and register with it
(tests/test_layout.py checks both).
"""
