# Install targets for strata (included by the top-level Makefile).
#
#   make install                      binary to $(PREFIX)/bin, mount helpers to $(SBINDIR)
#   make install DESTDIR=/tmp/pkg     staged, for packaging
#   make uninstall
#
# The helpers are symlinks named mount.strata and mount.fuse.strata: mount(8)
# runs /sbin/mount.<type> for `-t strata` and for fstab lines of type
# fuse.strata, and libmount looks for helpers in /sbin (and /sbin/fs.d,
# /sbin/fs) only, so SBINDIR defaults to /sbin rather than /usr/local/sbin.

PREFIX  ?= /usr/local
SBINDIR ?= /sbin
INSTALL ?= install

.PHONY: install uninstall

install: build
	$(INSTALL) -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SBINDIR)
	$(INSTALL) -m 0755 $(BIN)/strata $(DESTDIR)$(PREFIX)/bin/strata
	ln -sfn $(PREFIX)/bin/strata $(DESTDIR)$(SBINDIR)/mount.strata
	ln -sfn $(PREFIX)/bin/strata $(DESTDIR)$(SBINDIR)/mount.fuse.strata
	@echo "installed $(PREFIX)/bin/strata and the mount helpers $(SBINDIR)/mount.strata, $(SBINDIR)/mount.fuse.strata"
	@echo "systemd and logrotate examples: deploy/systemd/"

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/mount.fuse.strata $(DESTDIR)$(SBINDIR)/mount.strata $(DESTDIR)$(PREFIX)/bin/strata
