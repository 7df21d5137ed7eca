/*
 * bench/rpc's Java client: calls "echo" on eddy-rpc-server through Netty 4.1's own framing,
 * LengthFieldPrepender(4) out and LengthFieldBasedFrameDecoder(maxFrame, 0, 4, 0, 4) in, so a
 * run proves the wire compatibility as it measures. One connection on one NioEventLoop keeps
 * --inflight calls pending; every reply's id, status and body are checked. The first
 * --warmup calls let the JIT compile the path and are not counted.
 *
 *   java -cp NETTY_JARS:CLASSES NettyRpcClient [--host H] [--port N] [--calls N]
 *        [--warmup N] [--inflight N] [--size N]
 *
 * Prints "netty-rpc-client: N calls in S s" and "  X calls/s; latency p50 A us, p99 B us";
 * exit status 1 on a wrong reply, a lost connection or a timeout (60 s).
 */
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.codec.LengthFieldPrepender;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public final class NettyRpcClient {
    static final byte[] ECHO = "echo".getBytes(StandardCharsets.US_ASCII);

    static final class Caller extends ChannelInboundHandlerAdapter {
        final long warmup, total;
        final int inflight, size;
        final long[] sentAt;
        final long[] lat;
        final CountDownLatch done = new CountDownLatch(1);
        long nextId, finished;
        long t0, t1;
        String error;

        Caller(long warmup, long calls, int inflight, int size) {
            this.warmup = warmup;
            this.total = warmup + calls;
            this.inflight = inflight;
            this.size = size;
            this.sentAt = new long[Integer.highestOneBit(inflight * 2 - 1) * 2];
            this.lat = new long[(int) calls];
        }

        void send(ChannelHandlerContext ctx) {
            long id = nextId++;
            ByteBuf b = ctx.alloc().buffer(9 + ECHO.length + size);
            b.writeLong(id);
            b.writeByte(ECHO.length);
            b.writeBytes(ECHO);
            for (int i = 0; i < size; i++) {
                b.writeByte((int) (id + i));
            }
            sentAt[(int) (id & (sentAt.length - 1))] = System.nanoTime();
            ctx.write(b, ctx.voidPromise());
        }

        void fail(ChannelHandlerContext ctx, String why) {
            if (error == null) {
                error = why;
            }
            ctx.close();
            done.countDown();
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            for (int i = 0; i < inflight && nextId < total; i++) {
                send(ctx);
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf f = (ByteBuf) msg;
            try {
                if (f.readableBytes() != 9 + size) {
                    fail(ctx, "a reply of " + f.readableBytes() + " bytes");
                    return;
                }
                long id = f.readLong();
                int status = f.readUnsignedByte();
                if (status != 0 || id >= nextId) {
                    fail(ctx, "call " + id + ": status " + status);
                    return;
                }
                for (int i = 0; i < size; i++) {
                    if (f.readByte() != (byte) (id + i)) {
                        fail(ctx, "call " + id + ": wrong body");
                        return;
                    }
                }
                long now = System.nanoTime();
                if (finished == warmup) {
                    t0 = now;
                }
                if (finished >= warmup) {
                    lat[(int) (finished - warmup)] = now - sentAt[(int) (id & (sentAt.length - 1))];
                }
                finished++;
                if (finished == total) {
                    t1 = now;
                    ctx.close();
                    done.countDown();
                } else if (nextId < total) {
                    send(ctx);
                }
            } finally {
                f.release();
            }
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (finished < total) {
                fail(ctx, "the server closed the connection after " + finished + " calls");
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            fail(ctx, cause.toString());
        }
    }

    public static void main(String[] args) throws Exception {
        String host = "127.0.0.1";
        int port = 9000, inflight = 64, size = 64;
        long calls = 1_000_000, warmup = 200_000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--host": host = v; break;
                case "--port": port = Integer.parseInt(v); break;
                case "--calls": calls = Long.parseLong(v); break;
                case "--warmup": warmup = Long.parseLong(v); break;
                case "--inflight": inflight = Integer.parseInt(v); break;
                case "--size": size = Integer.parseInt(v); break;
                default:
                    System.err.println("usage: NettyRpcClient [--host H] [--port N] [--calls N]"
                        + " [--warmup N] [--inflight N] [--size N]");
                    System.exit(2);
            }
        }
        EventLoopGroup group = new NioEventLoopGroup(1);
        final Caller caller = new Caller(warmup, calls, inflight, size);
        int rc = 1;
        try {
            Bootstrap b = new Bootstrap();
            b.group(group)
                .channel(NioSocketChannel.class)
                .option(ChannelOption.TCP_NODELAY, true)
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    public void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new LengthFieldBasedFrameDecoder(1 << 20, 0, 4, 0, 4),
                            new LengthFieldPrepender(4), caller);
                    }
                });
            Channel ch = b.connect(host, port).sync().channel();
            if (!caller.done.await(60, TimeUnit.SECONDS)) {
                caller.error = "timed out after " + caller.finished + " calls";
                ch.close();
            }
            if (caller.error != null) {
                System.err.println("netty-rpc-client: " + caller.error);
            } else {
                double secs = (caller.t1 - caller.t0) / 1e9;
                long[] lat = caller.lat;
                Arrays.sort(lat);
                System.out.printf("netty-rpc-client: %d calls in %.3f s (after %d warm-up calls),"
                    + " %d in flight%n", calls, secs, warmup, inflight);
                System.out.printf("  %.0f calls/s; latency p50 %.1f us, p99 %.1f us%n",
                    calls / secs, lat[lat.length / 2] / 1e3, lat[(int) (lat.length * 0.99)] / 1e3);
                rc = 0;
            }
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
        System.exit(rc);
    }
}
