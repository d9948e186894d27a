#!/usr/bin/env bash
# tests/tools/dovecot_conf.sh DIR PORT CHROOT - prints a dovecot.conf for an
# IMAP server on 127.0.0.1:PORT whose files live under DIR (DIR/run, the
# log DIR/dovecot.log, the user alice:secret in DIR/passwd, mail under
# DIR/home as uid 65534); CHROOT "no" keeps its login processes out of a
# chroot (Debian's default chroots them).  Used by
# tests/integration/dovecot.sh and bench/imap.sh.
set -eu
dir=$1 port=$2 chroot=$3
cat <<CONF
base_dir = $dir/run
log_path = $dir/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
first_valid_uid = 1
first_valid_gid = 1
passdb {
  driver = passwd-file
  args = $dir/passwd
}
userdb {
  driver = static
  args = uid=65534 gid=65534 home=$dir/home/%u
}
mail_location = maildir:$dir/home/%u/Maildir
service imap-login {
$([ "$chroot" = no ] && echo "  chroot =")
  inet_listener imap {
    port = $port
  }
}
CONF
