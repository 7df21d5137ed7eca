/*
 * The Netty baseline of bench/tls: an echo server behind Netty's SslHandler with the JDK's
 * SSLEngine (SslProvider.JDK), on one NIO event loop (acceptor and connections), as eddy's
 * bench_tls server runs on one loop.
 *
 *   java -cp netty-{common,buffer,transport,handler,codec,resolver}.jar:. TlsEchoServer PORT CERT KEY
 */
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import java.io.File;

public final class TlsEchoServer {
    @Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close(); // resets from the handshake loop's clients
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        SslContext ssl = SslContextBuilder.forServer(new File(args[1]), new File(args[2]))
                .sslProvider(SslProvider.JDK).protocols("TLSv1.3", "TLSv1.2").build();
        EventLoopGroup group = new NioEventLoopGroup(1);
        Echo echo = new Echo();
        try {
            ServerBootstrap b = new ServerBootstrap().group(group)
                    .channel(NioServerSocketChannel.class)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(ssl.newHandler(ch.alloc()), echo);
                        }
                    });
            Channel c = b.bind("127.0.0.1", port).sync().channel();
            System.out.println("listening on 127.0.0.1:" + port);
            System.out.flush();
            c.closeFuture().sync();
        } finally {
            group.shutdownGracefully();
        }
    }
}
