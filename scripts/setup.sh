#!/usr/bin/env bash
# One-command set-up for gpu-100-days.
#   1. Installs any missing build dependency with apt (sudo when not root): CMake, ninja,
#      Catch2 (2.13 or 3.x, whichever the distribution ships) and fmt; with --charts also
#      matplotlib (python3-matplotlib), the optional dependency of scripts/charts.py.
#   2. Picks the GPU architecture: the GPU's own (nvidia-smi's compute capability; 9.0 becomes
#      90a, so an H100 or H200 gets the Hopper-only kernels), or 90a when there is no GPU. An
#      explicit -DCMAKE_CUDA_ARCHITECTURES=... wins. It says which it chose, and why.
#   3. Where cuDNN is installed, gets the cuDNN frontend's headers (header-only C++ over cuDNN's
#      graph API; day05's cuDNN fused-attention row uses it): it unpacks pip's
#      nvidia-cudnn-frontend wheel into .whl/cudnn_frontend/include, downloading the wheel into
#      .whl/ unless one is there already (a machine without network can be handed the .whl/
#      folder). Without network it says in one line that day05's cudnn_sdpa row will be skipped,
#      and the build goes on. --no-cudnn-frontend leaves the frontend out.
#   4. Configures and builds the `release` preset into build/ (--frontend-only stops before this:
#      scripts/arch_builds.sh uses it for builds into other folders).
# The CUDA Toolkit (nvcc, cuBLAS, CUB) is a prerequisite: it is checked, never installed here.
# Usage: scripts/setup.sh [--no-install] [--charts] [--no-cudnn-frontend] [--frontend-only]
#                         [--preset release|debug] [extra cmake -D options...]
# (--cudnn-frontend, the former opt-in, is still accepted: the frontend is now fetched by default.)
set -euo pipefail

cd "$(dirname "$0")/.."
preset=release
install=1
charts=0
frontend=1
frontend_only=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --charts) charts=1 ;;
    --cudnn-frontend) frontend=1 ;;
    --no-cudnn-frontend) frontend=0 ;;
    --frontend-only) frontend_only=1 ;;
    --preset) preset="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) extra+=("$1") ;;
  esac
  shift
done

say() { printf 'setup: %s\n' "$*"; }

# --- 1. dependencies --------------------------------------------------------------------------
# Each entry: <apt package> <a check that succeeds when the dependency is present>.
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
if ! have_header catch2/catch.hpp && ! have_header catch2/catch_test_macros.hpp; then
  missing+=(catch2)
fi
if ! have_header fmt/format.h; then missing+=(libfmt-dev); fi
if [ "$charts" -eq 1 ] && ! /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; then
  missing+=(python3-matplotlib)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$install" -eq 0 ]; then
    say "missing: ${missing[*]} (install them with: apt-get install ${missing[*]})"
    exit 1
  fi
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if ! command -v apt-get >/dev/null 2>&1; then
    say "missing: ${missing[*]}, and apt-get is not available: install them with your package manager"
    exit 1
  fi
  say "installing ${missing[*]} with apt-get"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CMake >= 3.24 is required (CMAKE_CUDA_ARCHITECTURES=native, presets v4).
cmake_version=$(cmake --version | head -n1 | awk '{print $3}')
if ! printf '3.24.0\n%s\n' "$cmake_version" | sort -V -C; then
  say "CMake $cmake_version is too old: 3.24 or newer is needed (pip install cmake, or Kitware's apt repository)"
  exit 1
fi

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /opt/cuda/bin; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
if ! command -v nvcc >/dev/null 2>&1; then
  say "nvcc not found: install the CUDA Toolkit 12.x or 13.x (apt package cuda-toolkit from NVIDIA's"
  say "repository, or nvidia-cuda-toolkit from the distribution) and put its bin/ on PATH"
  exit 1
fi
say "using $(nvcc --version | tail -n1), $(cmake --version | head -n1)"

# --- 2. the GPU architecture -----------------------------------------------------------------
arch_given=""
for a in "${extra[@]}"; do
  case "$a" in -DCMAKE_CUDA_ARCHITECTURES=*) arch_given="${a#-DCMAKE_CUDA_ARCHITECTURES=}" ;; esac
done
if [ -n "$arch_given" ]; then
  say "building for CMAKE_CUDA_ARCHITECTURES=$arch_given (given on the command line)"
else
  cap=""
  gpu=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    line=$(nvidia-smi --query-gpu=compute_cap,name --format=csv,noheader 2>/dev/null | head -n1)
    cap=$(printf '%s' "$line" | cut -d, -f1 | tr -d ' ')
    gpu=$(printf '%s' "$line" | cut -d, -f2- | sed 's/^ *//')
  fi
  if printf '%s' "$cap" | grep -Eq '^[0-9]+\.[0-9]+$'; then
    arch="${cap%%.*}${cap#*.}"
    [ "$arch" = 90 ] && arch=90a  # the H100/H200: 90a also builds wgmma, TMA and setmaxnreg code
    if nvcc --list-gpu-code 2>/dev/null | grep -qx "sm_${arch%a}"; then
      say "building for CMAKE_CUDA_ARCHITECTURES=$arch: the GPU here is the $gpu (compute capability $cap)"
    else
      newest=$(nvcc --list-gpu-arch 2>/dev/null | sed 's/compute_//' | sort -n | tail -n1)
      say "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') cannot build sm_${arch%a} for the $gpu;"
      say "building compute_$newest PTX instead (CMAKE_CUDA_ARCHITECTURES=$newest-virtual), which the driver"
      say "compiles for the GPU at load time; a newer CUDA Toolkit builds its own code"
      arch="$newest-virtual"
    fi
  else
    arch=90a
    say "no GPU found (nvidia-smi gave no compute capability): building CMAKE_CUDA_ARCHITECTURES=90a,"
    say "the H100/H200 code the published results come from"
  fi
  say "another GPU: ./scripts/setup.sh -DCMAKE_CUDA_ARCHITECTURES=86 (75: T4, 80: A100, 86: RTX 30xx, 89: RTX 40xx / L4)"
  extra+=("-DCMAKE_CUDA_ARCHITECTURES=$arch")
fi

# --- 3. the cuDNN frontend headers (optional) -------------------------------------------------
# Only where cuDNN itself is installed (CMake looks in the same places) and no other frontend was
# named with -DCUDNN_FRONTEND_ROOT.
have_cudnn() {
  local d
  for d in ${CUDNN_ROOT:-} "$(dirname "$(dirname "$(command -v nvcc)")")" /usr/local/cuda /usr \
    /usr/local; do
    [ -n "$d" ] && [ -e "$d/include/cudnn.h" ] && return 0
  done
  [ -e /usr/include/x86_64-linux-gnu/cudnn.h ] || [ -e /usr/include/aarch64-linux-gnu/cudnn.h ]
}
frontend_given=0
for a in "${extra[@]}"; do
  case "$a" in -DCUDNN_FRONTEND_ROOT=*) frontend_given=1 ;; esac
done
[ -n "${CUDNN_FRONTEND_ROOT:-}" ] && frontend_given=1
# The version the results were measured with; a wheel already in .whl/ is used whatever its version.
frontend_version=1.32.0
skip_line="day05's cudnn_sdpa row (cuDNN's fused attention) will be skipped"
# The choice reaches CMake too, so that headers unpacked by an earlier run are left out as well.
extra=("-DGPU100_CUDNN_FRONTEND=$([ "$frontend" -eq 1 ] && echo ON || echo OFF)" "${extra[@]}")
if [ "$frontend" -eq 0 ]; then
  say "--no-cudnn-frontend: $skip_line"
elif [ "$frontend_given" -eq 1 ] || [ -e .whl/cudnn_frontend/include/cudnn_frontend.h ]; then
  : # CMake finds it
elif ! have_cudnn; then
  say "cuDNN not found (its rows will be skipped), so the cuDNN frontend is not fetched"
else
  mkdir -p .whl
  wheel=$(ls .whl/nvidia_cudnn_frontend-*.whl 2>/dev/null | head -n1 || true)
  if [ -z "$wheel" ] && python3 -m pip --version >/dev/null 2>&1; then
    say "downloading pip's nvidia-cudnn-frontend $frontend_version (its C++ headers) into .whl/"
    timeout 120 python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      --timeout 15 --retries 1 --dest .whl "nvidia-cudnn-frontend==$frontend_version" >/dev/null 2>&1 || true
    wheel=$(ls .whl/nvidia_cudnn_frontend-*.whl 2>/dev/null | head -n1 || true)
  fi
  if [ -z "$wheel" ]; then
    say "could not fetch nvidia-cudnn-frontend (no network, or no pip): $skip_line; the tests still pass"
  else
    python3 - "$wheel" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.startswith("include/") and not name.endswith("/"):
            z.extract(name, ".whl/cudnn_frontend")
PY
    say "cuDNN frontend headers from $(basename "$wheel") in .whl/cudnn_frontend/include"
  fi
fi

[ "$frontend_only" -eq 1 ] && exit 0

# --- 4. configure and build ------------------------------------------------------------------
cmake --preset "$preset" "${extra[@]}"
cmake --build --preset "$preset"
say "done: run the tests with  ctest --test-dir $( [ "$preset" = release ] && echo build || echo build-$preset ) --output-on-failure"
