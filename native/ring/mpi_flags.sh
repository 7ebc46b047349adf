#!/bin/sh
# mpi_flags.sh have|cflags|libs — Open MPI detection for binding.gyp.
# have: 1 when mpicxx works, else 0; cflags / libs: its compile / link flags,
# or nothing. Never fails, so a machine without MPI still configures.
case "$1" in
  have) if command -v mpicxx >/dev/null 2>&1 && mpicxx --showme:compile >/dev/null 2>&1; then echo 1; else echo 0; fi ;;
  cflags) mpicxx --showme:compile 2>/dev/null || true ;;
  libs) mpicxx --showme:link 2>/dev/null || true ;;
esac
