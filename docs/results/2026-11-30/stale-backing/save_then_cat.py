import os, sys, time, random
mnt = sys.argv[1]
n = int(sys.argv[2])
bad = 0
R = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
for i in range(n):
    d = os.path.join(mnt, "u%d_%d" % (os.getpid(), i))
    os.mkdir(d)
    f1, f2 = os.path.join(d, "f1"), os.path.join(d, "f2")
    fd = os.open(f1, os.O_EXCL | os.O_CREAT | os.O_RDWR)
    os.ftruncate(fd, 59112)
    os.pwrite(fd, os.urandom(16875), 137092)
    os.pwrite(fd, os.urandom(45380), 74341)
    os.close(fd)
    t1, t2, t3 = R.random() * 0.05, R.random() * 0.05, R.random() * 0.05
    time.sleep(t1)
    os.rename(f1, f2)
    a = os.open(f2, os.O_RDONLY)
    b = os.dup(a)
    time.sleep(t2)
    os.pread(a, 1000, 100)
    c = os.open(f2, os.O_TRUNC | os.O_CREAT | os.O_WRONLY)
    time.sleep(t3)
    os.close(b)
    os.close(a)
    os.close(c)
    s1 = os.stat(f2).st_size
    with open(f2, "rb") as f:
        r1 = len(f.read())
    time.sleep(0.3)
    s2 = os.stat(f2).st_size
    with open(f2, "rb") as f:
        r = len(f.read())
    if s1 or s2 or r or r1:
        bad += 1
        print("iter", i, "sizes", s1, r1, s2, r, "sleeps %.3f %.3f %.3f" % (t1, t2, t3), flush=True)
print("bad", bad, "of", n)
