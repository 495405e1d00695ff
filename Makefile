# Two commands do all the set-up on a fresh machine:
#   make demo   set up, then train and test TNT on Fashion-MNIST (no ImageNet needed)
#   make test   set up, then run the test suite
#   make test-long   the tests marked long too (learning checks of minutes)
VENV ?= .venv
# Test processes (pytest-xdist): one per core by default, each computing on
# one thread (tests/conftest.py); TEST_WORKERS=0 runs the suite in one
# process.
TEST_WORKERS ?= auto
PY := $(VENV)/bin/python
STAMP := $(VENV)/.mmtnt-installed

.PHONY: setup demo test test-long

$(STAMP): tools/setup_env.sh setup.py requirements/mminstall.txt requirements/runtime.txt requirements/tests.txt
	bash tools/setup_env.sh $(VENV)
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(PY) tools/dataset_converters/prepare_fashion_mnist.py data/fashion_mnist
	$(PY) tools/train.py configs/demo/tnt-demo_1xb128_fashion-mnist.py --work-dir work_dirs/demo
	$(PY) tools/test.py configs/demo/tnt-demo_1xb128_fashion-mnist.py "$$(cat work_dirs/demo/last_checkpoint)" --work-dir work_dirs/demo

test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup tests

test-long: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --long tests
