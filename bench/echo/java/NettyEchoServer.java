/*
 * The Netty 4.1 NIO baseline of bench/echo: Netty's own echo example, on one NioEventLoop that
 * both accepts and serves (as eddy's one loop does), with the pooled allocator Netty uses by
 * default. Each read buffer is written back as it is and flushed once per read batch, as in
 * bench/echo/server_eddy.c.
 *
 *   java -cp NETTY_JARS:CLASSES NettyEchoServer [--port N]
 *
 * Prints "netty_nio: listening on PORT" once bound; SIGTERM ends it.
 */
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;

public final class NettyEchoServer {
    @ChannelHandler.Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg, ctx.voidPromise());
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close(); // resets from the churn clients are expected
        }
    }

    public static void main(String[] args) throws Exception {
        int port = 8007;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--port") && i + 1 < args.length) {
                port = Integer.parseInt(args[++i]);
            } else if (args[i].equals("--cpu") && i + 1 < args.length) {
                i++; // run.sh pins the JVM with taskset
            } else {
                System.err.println("usage: NettyEchoServer [--port N]");
                System.exit(2);
            }
        }
        EventLoopGroup group = new NioEventLoopGroup(1);
        final Echo echo = new Echo();
        try {
            ServerBootstrap b = new ServerBootstrap();
            b.group(group)
                .channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    public void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(echo);
                    }
                });
            ChannelFuture f = b.bind("127.0.0.1", port).sync();
            System.out.println("netty_nio: listening on " + port);
            System.out.flush();
            f.channel().closeFuture().sync();
        } finally {
            group.shutdownGracefully();
        }
    }
}
