# The hand-set ranges against the automatic ones on one GPU, from the repository root, with
# pycuda importable: bash results/reference/h100/hand_ranges/compare.sh OUTDIR
#   l1_size: config/gpu.yaml (automatic) and the hand-set config (hand_config.py), alternating,
#            ROUNDS times (default 3); l2: both once; with FINE=1, the l2 walk twice more on the
#            0.25-MiB grid of fine_config.py around the near-partition and whole-L2 steps.
# Traces go to OUTDIR/traces, their analyses to OUTDIR/analysis, the configs beside them.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=$1
ROUNDS=${ROUNDS:-3}
export PYTHONPATH=$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}
gpudissect() { python3 -m gpudissect "$@"; }
mkdir -p "$OUTDIR/traces" "$OUTDIR/analysis" "$OUTDIR/cubins"
gpudissect compile --kernel kernels/pchase.cu --arch sm_90 --out "$OUTDIR/cubins/pchase.cubin"
python3 "$HERE/hand_config.py" "$OUTDIR/hand.yaml"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$OUTDIR/gpu.txt"
walk() {  # experiment config trace-name
  local t0 t1
  t0=$(date +%s.%N)
  gpudissect run --config "$2" --device gpu0 --experiment "$1" \
    --out "$OUTDIR/traces/$3.parquet" --cubin-dir "$OUTDIR/cubins" 2>&1 | tail -2
  t1=$(date +%s.%N)
  echo "$3: $(python3 -c "print(round($t1 - $t0, 1))") s"
  gpudissect analyze --trace "$OUTDIR/traces/$3.parquet" --out "$OUTDIR/analysis/$3.json" | tail -1
}
for r in $(seq 1 "$ROUNDS"); do
  walk l1_size config/gpu.yaml "l1_auto_$r"
  walk l1_size "$OUTDIR/hand.yaml" "l1_hand_$r"
done
walk l2 config/gpu.yaml l2_auto_1
walk l2 "$OUTDIR/hand.yaml" l2_hand_1
if [ "${FINE:-0}" = 1 ]; then
  l2=$(python3 -c "import pycuda.driver as d; d.init(); print(d.Device(0).get_attribute(d.device_attribute.L2_CACHE_SIZE))")
  python3 "$HERE/fine_config.py" "$l2" "$OUTDIR/fine.yaml"
  walk l2 "$OUTDIR/fine.yaml" l2_fine_1
  walk l2 "$OUTDIR/fine.yaml" l2_fine_2
fi
