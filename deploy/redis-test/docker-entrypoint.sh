#!/bin/sh
# As the official redis image's entrypoint: arguments that start with '-' go
# to redis-server; redis-server started as root runs as the redis user.
set -e
if [ "${1#-}" != "$1" ]; then
  set -- redis-server "$@"
fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
  exec setpriv --reuid=redis --regid=redis --init-groups "$@"
fi
exec "$@"
