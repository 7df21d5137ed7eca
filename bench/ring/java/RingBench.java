// The Java Disruptor 3.4.4 baseline for bench_ring: the same events (longs), ring size and
// cases (1p1c, 2p1c) with the busy-spin, yielding and blocking wait strategies. Threads are not
// pinned (the JDK cannot).
//   java -cp disruptor.jar:. RingBench [events] [rounds]
//       one warm-up round, then ROUNDS rounds, strategies alternating within each round; one
//       JSON line per case with the median and min-max ops/s.
//   java -cp disruptor.jar:. RingBench --serve
//       bench_ring's mode: reads "CASE STRATEGY EVENTS" lines on stdin, runs each once and
//       answers with its ops/s on a line of its own, so bench_ring alternates the JVM's runs
//       with its own in one process tree, round by round, the JIT staying warm between them.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import com.lmax.disruptor.*;
import com.lmax.disruptor.dsl.Disruptor;
import com.lmax.disruptor.dsl.ProducerType;
import com.lmax.disruptor.util.DaemonThreadFactory;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;

public final class RingBench {
    static final int RING_SIZE = 65536;

    static final class LongEvent {
        long value;
    }

    static final class Sink implements EventHandler<LongEvent> {
        final long target;
        final CountDownLatch latch = new CountDownLatch(1);
        long count, sum, endNs;

        Sink(long target) {
            this.target = target;
        }

        @Override
        public void onEvent(LongEvent e, long seq, boolean endOfBatch) {
            sum += e.value;
            if (++count == target) {
                endNs = System.nanoTime();
                latch.countDown();
            }
        }
    }

    static WaitStrategy strategy(String name) {
        switch (name) {
        case "busyspin": return new BusySpinWaitStrategy();
        case "yielding": return new YieldingWaitStrategy();
        default: return new BlockingWaitStrategy();
        }
    }

    static double run(int producers, String ws, long n) throws Exception {
        Disruptor<LongEvent> d = new Disruptor<>(LongEvent::new, RING_SIZE, DaemonThreadFactory.INSTANCE,
                producers > 1 ? ProducerType.MULTI : ProducerType.SINGLE, strategy(ws));
        Sink sink = new Sink(n);
        d.handleEventsWith(sink);
        RingBuffer<LongEvent> rb = d.start();
        long t0 = System.nanoTime();
        Thread[] ts = new Thread[producers];
        for (int p = 0; p < producers; p++) {
            final long from = p * (n / producers);
            final long count = p == producers - 1 ? n - from : n / producers;
            ts[p] = new Thread(() -> {
                for (long i = from; i < from + count; i++) {
                    long seq = rb.next();
                    rb.get(seq).value = i;
                    rb.publish(seq);
                }
            });
            ts[p].start();
        }
        for (Thread t : ts)
            t.join();
        sink.latch.await();
        double ops = n * 1e9 / (sink.endNs - t0);
        d.shutdown();
        if (sink.sum != (n - 1) * n / 2)
            throw new IllegalStateException("lost events");
        return ops;
    }

    static void serve() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length != 3) {
                System.out.println("error");
                System.out.flush();
                continue;
            }
            double ops = run(f[0].equals("1p1c") ? 1 : 2, f[1], Long.parseLong(f[2]));
            System.out.printf("%.6g%n", ops);
            System.out.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--serve")) {
            serve();
            return;
        }
        long n = args.length > 0 ? Long.parseLong(args[0]) : 50_000_000L;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        String[] cases = {"1p1c", "2p1c"};
        String[] strategies = {"busyspin", "yielding", "blocking"};
        for (String c : cases) {
            int producers = c.equals("1p1c") ? 1 : 2;
            double[][] v = new double[strategies.length][rounds];
            for (int r = 0; r <= rounds; r++)
                for (int w = 0; w < strategies.length; w++) {
                    double ops = run(producers, strategies[w], n);
                    if (r > 0)
                        v[w][r - 1] = ops;
                }
            for (int w = 0; w < strategies.length; w++) {
                double[] s = v[w].clone();
                Arrays.sort(s);
                double med = rounds % 2 == 1 ? s[rounds / 2] : (s[rounds / 2 - 1] + s[rounds / 2]) / 2;
                System.out.printf("{\"bench\":\"ring\",\"case\":\"%s_%s\",\"subject\":\"java_disruptor\","
                        + "\"ops_per_s\":%.4g,\"min\":%.4g,\"max\":%.4g,\"rounds\":%d,\"events\":%d,"
                        + "\"java\":\"%s\",\"disruptor\":\"3.4.4\"}%n",
                        c, strategies[w], med, s[0], s[rounds - 1], rounds, n,
                        System.getProperty("java.version"));
            }
        }
    }
}
