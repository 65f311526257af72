package csi

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// podPaths locates, from a kubelet target path
// (<kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount), the
// pod's emptyDir shared with the sidecar and the volume's name in it.
func podPaths(target, handoffVolume string) (dir, volume string, err error) {
	mountDir, leaf := filepath.Split(target)
	volDir := filepath.Clean(mountDir)
	volume = filepath.Base(volDir)
	plugins := filepath.Dir(volDir)
	volumes := filepath.Dir(plugins)
	podDir := filepath.Dir(volumes)
	if leaf != "mount" || filepath.Base(plugins) != "kubernetes.io~csi" || filepath.Base(volumes) != "volumes" ||
		filepath.Base(filepath.Dir(podDir)) != "pods" {
		return "", "", fmt.Errorf("target %s is not a kubelet pod volume path (…/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount)", target)
	}
	return filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", handoffVolume, volume), volume, nil
}

// handoffAnswer bounds how long a connected sidecar may take to start
// serving (open the backend, check the bucket, open the cache) and say so.
const handoffAnswer = 5 * time.Minute

// sidecarVol is one sidecar-mode target waiting for, or handed to, its
// sidecar.
type sidecarVol struct {
	target   string
	dir      string
	hdir     *handoffDir // dir, opened once; closed by release
	handoff  Handoff
	readOnly bool
	timeout  time.Duration
	log      interface {
		Info(string, ...any)
		Warn(string, ...any)
	}

	mu      sync.Mutex
	l       *net.UnixListener
	dev     *os.File      // nil once the sidecar reported ready
	conn    *net.UnixConn // the sidecar that reported ready
	pending *net.UnixConn // a sidecar in the middle of the hand-off
	lastErr string
	stopped bool
	done    chan struct{}
}

// publishSidecar mounts target on a fresh /dev/fuse connection and
// waits, in the background, for the pod's sidecar to take it.
func (d *Driver) publishSidecar(volumeID, target string, spec Spec, creds Credentials) error {
	d.mu.Lock()
	v := d.sidecars[target]
	d.mu.Unlock()
	if v != nil {
		if v.handoff.VolumeID != volumeID || v.handoff.Source != spec.Source || v.readOnly != spec.ReadOnly ||
			!slices.Equal(v.handoff.Args, spec.Args) {
			return errorf(codes.AlreadyExists, "%s is already published as volume %s with other attributes or read-only setting", target, v.handoff.VolumeID)
		}
		if msg := v.failure(); msg != "" {
			return errorf(codes.Unavailable, "the strata sidecar could not serve %s: %s", target, msg)
		}
		return nil
	}
	if ok, err := isMounted(target); err != nil || ok {
		return err // mounted before a plugin restart: nothing more to do here
	}
	dir, volume, err := podPaths(target, spec.HandoffVolume)
	if err != nil {
		return errorf(codes.FailedPrecondition, "sidecar mode: %v", err)
	}
	// dir is in the pod's emptyDir, which the pod writes: it is opened
	// once, refusing a symlink, and used through that descriptor only
	// (handoffdir.go).
	hdir, err := openHandoffDir(dir)
	if errors.Is(err, errHandoffDir) {
		return errorf(codes.FailedPrecondition, "sidecar mode: %v", err)
	} else if err != nil {
		return err
	}
	// The sidecar, any uid, writes ready/error here.
	if err := hdir.chmodDir(0o777); err != nil {
		d.log.Warn("csi: hand-off dir not writable for all; a sidecar of another uid cannot answer", "dir", dir, "err", err)
	}
	for _, name := range []string{ReadyName, ErrorName} {
		if err := hdir.remove(name); err != nil {
			d.log.Warn("csi: stale hand-off file", "err", err)
		}
	}
	l, err := hdir.listen()
	if errors.Is(err, errHandoffDir) {
		_ = hdir.Close()
		return errorf(codes.FailedPrecondition, "sidecar mode: %v", err)
	} else if err != nil {
		_ = hdir.Close()
		return err
	}
	dev, err := mountFUSE(target, spec.Source, spec.ReadOnly)
	if err != nil {
		l.Close()
		_ = hdir.remove(SocketName) // best effort: the publish failed anyway
		_ = hdir.Close()
		return err
	}
	if spec.ReadAheadKB > 0 {
		if err := setReadAhead(target, spec.ReadAheadKB); err != nil {
			d.log.Warn("csi: kernel readahead unchanged", "target", target, "err", err)
		}
	}
	v = &sidecarVol{target: target, dir: dir, hdir: hdir, readOnly: spec.ReadOnly, timeout: d.opts.HandoffTimeout, log: d.log, l: l, dev: dev, done: make(chan struct{}),
		handoff: Handoff{VolumeID: volumeID, VolumeName: volume, Source: spec.Source, Args: spec.Args,
			CacheDir: spec.CacheDir, Env: creds.Env, Files: creds.Files, Backing: true}}
	d.mu.Lock()
	d.sidecars[target] = v
	d.mu.Unlock()
	go v.serve()
	d.log.Info("csi: mounted; waiting for the sidecar", "target", target, "socket", filepath.Join(dir, SocketName),
		"pod", spec.PodNamespace+"/"+spec.PodName)
	return nil
}

// serve hands the descriptor to each sidecar that connects until one
// reports ready, the hand-off times out, or the volume is unpublished.
func (v *sidecarVol) serve() {
	defer close(v.done)
	// Fails only on a closed listener, which Accept then reports.
	_ = v.l.SetDeadline(time.Now().Add(v.timeout))
	for {
		c, err := v.l.AcceptUnix()
		if err != nil {
			v.mu.Lock()
			stopped := v.stopped
			v.mu.Unlock()
			if !stopped {
				v.log.Warn("csi: no sidecar took the mount; giving it up (the target now fails with ENOTCONN)",
					"target", v.target, "after", v.timeout, "err", err)
				v.fail("no strata sidecar connected within " + v.timeout.String())
			}
			v.release()
			return
		}
		v.mu.Lock()
		v.pending = c
		stopped := v.stopped
		v.mu.Unlock()
		if stopped {
			c.Close()
			v.release()
			return
		}
		// Set and cleared below; fails only on a closed connection, which
		// the hand-off's reads and writes then report.
		_ = c.SetReadDeadline(time.Now().Add(handoffAnswer))
		if err := SendHandoff(c, v.handoff, v.dev); err != nil {
			c.Close()
			v.fail(err.Error())
			continue
		}
		var peer *backingPeer
		var m Control
		if v.handoff.Backing {
			peer = newBackingPeer(c, v.dev, v.log)
			m, err = peer.next()
		} else {
			m, err = RecvControl(c)
		}
		_ = c.SetReadDeadline(time.Time{})
		v.mu.Lock()
		v.pending = nil
		v.mu.Unlock()
		switch {
		case err == nil && m.Op == OpReady:
			v.mu.Lock()
			v.conn, v.lastErr = c, ""
			dev := v.dev
			if v.handoff.Backing {
				v.dev = nil // peer.serve owns it now
			}
			v.mu.Unlock()
			v.log.Info("csi: sidecar serves the mount", "target", v.target)
			v.release()
			if peer != nil && dev != nil {
				go peer.serve()
			}
			return
		case err == nil && m.Op == OpError:
			v.fail(m.Error)
		default:
			v.fail(fmt.Sprintf("sidecar went away during the hand-off (%v)", err))
		}
		c.Close()
	}
}

func (v *sidecarVol) fail(msg string) {
	v.mu.Lock()
	v.lastErr = msg
	v.mu.Unlock()
	v.log.Warn("csi: sidecar hand-off failed; waiting for a retry", "target", v.target, "err", msg)
}

// failure is the last hand-off error while no sidecar serves.
func (v *sidecarVol) failure() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lastErr
}

// release closes the listener and the plugin's copy of the descriptor
// (unless the backing peer took it, which closes it when the sidecar's
// connection ends): from then on only the sidecar keeps the FUSE
// connection alive, so its death makes the mount fail fast (ENOTCONN)
// instead of hang.
func (v *sidecarVol) release() {
	v.mu.Lock()
	l, dev := v.l, v.dev
	v.l, v.dev = nil, nil
	v.mu.Unlock()
	if l != nil {
		l.Close()
		// Through the descriptor: the pod may have put a symlink at dir
		// since, and a path would remove a "socket" wherever it points.
		if err := v.hdir.remove(SocketName); err != nil {
			v.log.Warn("csi: removing the hand-off socket", "err", err)
		}
		_ = v.hdir.Close() // read-only directory: nothing to flush
	}
	if dev != nil {
		dev.Close()
	}
}

// stop ends the hand-off and tells a serving sidecar to exit.
func (v *sidecarVol) stop() {
	v.mu.Lock()
	v.stopped = true
	l, c, p := v.l, v.conn, v.pending
	v.conn = nil
	v.mu.Unlock()
	if l != nil {
		l.Close() // wakes serve, which releases the rest
	}
	if p != nil {
		p.Close()
	}
	<-v.done
	if c != nil {
		if err := SendControl(c, Control{Op: OpExit}); err != nil && !errors.Is(err, net.ErrClosed) {
			v.log.Info("csi: sidecar already gone", "target", v.target, "err", err)
		}
		c.Close()
	}
}

// unpublishSidecar unmounts a sidecar-mode (or unknown) target, tells its
// sidecar to exit and removes the hand-off directory and the target.
func (d *Driver) unpublishSidecar(target string) error {
	d.mu.Lock()
	v := d.sidecars[target]
	delete(d.sidecars, target)
	d.mu.Unlock()
	if err := unmountAll(target); err != nil {
		return err
	}
	if v != nil {
		v.stop()
		// RemoveAll unlinks a symlink put at dir instead of following it,
		// and never follows one below it.
		os.RemoveAll(v.dir)
	}
	return removeTarget(target)
}

// closeHandoffs stops waiting for sidecars when the plugin exits.
func (d *Driver) closeHandoffs() {
	d.mu.Lock()
	vs := make([]*sidecarVol, 0, len(d.sidecars))
	for _, v := range d.sidecars {
		vs = append(vs, v)
	}
	d.mu.Unlock()
	for _, v := range vs {
		v.mu.Lock()
		v.stopped = true
		l := v.l
		v.mu.Unlock()
		if l != nil {
			l.Close()
		}
	}
}
