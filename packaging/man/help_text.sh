#!/bin/sh
# PROGRAM --help as help2man reads it (cmake/package.cmake): a "usage:" block becomes "Usage:"
# and "or:" lines, each a whole synopsis (a line going on with "[" joins the one above), so
# that they are the man page's SYNOPSIS instead of reflowed text.
#   help_text.sh PROGRAM --help
prog=$1
shift
"$prog" "$@" | awk '
  /^usage: / { sub(/^usage:/, "Usage:"); line = $0; in_usage = 1; next }
  in_usage && /^ +\[/ { sub(/^ +/, " "); line = line $0; next }
  in_usage && /^ +[^ ]/ { print line; sub(/^ +/, "   or: "); line = $0; next }
  in_usage { print line; in_usage = 0 }
  { print }
  END { if (in_usage) print line }'
