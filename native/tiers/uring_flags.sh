#!/bin/sh
# uring_flags.sh have|libs — liburing detection for binding.gyp (like
# native/ring/mpi_flags.sh). have: 1 when a program using liburing compiles and
# links here, else 0; libs: its link flags, or nothing. Never fails, so a
# machine without liburing still configures (and gets the thread-pool backend).
probe() {
  tmp="${TMPDIR:-/tmp}/tiercut-uring-probe-$$"
  printf '#include <liburing.h>\nint main(void) { struct io_uring r; return io_uring_queue_init(1, &r, 0) == 0 ? 0 : 1; }\n' > "$tmp.c"
  if ${CC:-cc} "$tmp.c" -o "$tmp" -luring >/dev/null 2>&1; then ok=1; else ok=0; fi
  rm -f "$tmp.c" "$tmp"
  echo $ok
}
case "$1" in
  have) if [ "${TIERCUT_NO_URING:-0}" = 1 ]; then echo 0; else probe; fi ;;
  libs) if [ "${TIERCUT_NO_URING:-0}" != 1 ] && [ "$(probe)" = 1 ]; then echo -luring; fi ;;
esac
