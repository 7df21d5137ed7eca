/*
 * The Netty 4.1 baseline of bench/ws: HttpServerCodec, HttpObjectAggregator and
 * WebSocketServerProtocolHandler on /ws (Netty's websocketx: it answers pings and closes and
 * passes text, binary and continuation frames on; no extensions, as eddy's subject runs without
 * permessage-deflate), then one handler of ours, all on one NioEventLoop that both accepts and
 * serves (as eddy's one loop does), with the pooled allocator Netty uses by default.
 *
 *   echo (default)  each text or binary frame is written back as it is, one flush per read
 *                   batch, as bench/ws/server_eddy.c does;
 *   --broadcast     each message goes to every upgraded connection (the sender too) through
 *                   a DefaultChannelGroup (executor: the event loop): writeAndFlush gives
 *                   each member a retained duplicate of the frame, and Netty's
 *                   WebSocket08FrameEncoder writes a payload over 1 KiB as a reference
 *                   beside its header, a smaller one copied after it.
 *
 *   java -cp NETTY_JARS:CLASSES NettyWsServer [--port N] [--broadcast]
 *
 * Prints "netty_ws: listening on PORT" once bound; SIGTERM ends it.
 */
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketServerProtocolHandler;
import io.netty.util.ReferenceCountUtil;

public final class NettyWsServer {
    static final int MAX_FRAME = 1 << 20; // eddy's EDDY_WS_MAX_FRAME_SIZE

    @ChannelHandler.Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof BinaryWebSocketFrame || msg instanceof TextWebSocketFrame) {
                ctx.write(msg, ctx.voidPromise());
            } else {
                ReferenceCountUtil.release(msg);
            }
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close(); // the load generators close with resets
        }
    }

    @ChannelHandler.Sharable
    static final class Broadcast extends ChannelInboundHandlerAdapter {
        final ChannelGroup members;

        Broadcast(ChannelGroup members) {
            this.members = members;
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            if (evt instanceof WebSocketServerProtocolHandler.HandshakeComplete) {
                members.add(ctx.channel());
            }
            ctx.fireUserEventTriggered(evt);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof BinaryWebSocketFrame || msg instanceof TextWebSocketFrame) {
                members.writeAndFlush(msg); // a retained duplicate each; msg released
            } else {
                ReferenceCountUtil.release(msg);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    public static void main(String[] args) throws Exception {
        int port = 8008;
        boolean broadcast = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--port") && i + 1 < args.length) {
                port = Integer.parseInt(args[++i]);
            } else if (args[i].equals("--cpu") && i + 1 < args.length) {
                i++; // run.sh pins the JVM with taskset
            } else if (args[i].equals("--broadcast")) {
                broadcast = true;
            } else {
                System.err.println("usage: NettyWsServer [--port N] [--broadcast]");
                System.exit(2);
            }
        }
        EventLoopGroup group = new NioEventLoopGroup(1);
        final ChannelHandler app = broadcast
            ? new Broadcast(new DefaultChannelGroup("ws-members", group.next()))
            : new Echo();
        try {
            ServerBootstrap b = new ServerBootstrap();
            b.group(group)
                .channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    public void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new HttpServerCodec(),
                            new HttpObjectAggregator(65536),
                            new WebSocketServerProtocolHandler("/ws", null, false, MAX_FRAME),
                            app);
                    }
                });
            ChannelFuture f = b.bind("127.0.0.1", port).sync();
            System.out.println("netty_ws: listening on " + port);
            System.out.flush();
            f.channel().closeFuture().sync();
        } finally {
            group.shutdownGracefully();
        }
    }
}
