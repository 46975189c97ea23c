package dev.fjord.diff;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import org.apache.fluss.rpc.messages.ApiMessage;
import org.apache.fluss.rpc.messages.ApiVersionsRequest;

/**
 * One raw TCP connection speaking Fluss's framing: a request is {@code i32 length | i16 api_key |
 * i16 api_version | i32 request_id | body}, a response {@code i32 length | i8 type | i32
 * request_id | body} (all big-endian). Request ids count up from 0 per connection, as the official
 * clients do; the first request on a connection is ApiVersions, as the clients send it.
 */
final class Wire implements AutoCloseable {
    /** A response frame: its type (0 ok, 1 error, 2 server failure) and its body. */
    record Frame(int type, byte[] body) {}

    /** Bounds every read: a server that does not answer fails the test instead of hanging it. */
    private static final int READ_TIMEOUT_MS = 30_000;

    private final Socket socket;
    private final DataOutputStream out;
    private final DataInputStream in;
    private int nextRequestId;
    final String address;

    Wire(String hostPort) throws IOException {
        this.address = hostPort;
        int colon = hostPort.lastIndexOf(':');
        socket = new Socket();
        socket.connect(
                new InetSocketAddress(
                        hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1))),
                10_000);
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(READ_TIMEOUT_MS);
        out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
        in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
    }

    /** Opens a connection and sends the ApiVersions request the Java client opens with. */
    static Wire open(String hostPort) throws IOException {
        Wire wire = new Wire(hostPort);
        ApiVersionsRequest hello =
                new ApiVersionsRequest().setClientSoftwareName("fluss").setClientSoftwareVersion("0.1.0");
        Frame frame = wire.call(1000, 0, hello.toByteArray());
        if (frame.type() != 0) {
            throw new IOException("ApiVersions to " + hostPort + " answered with type " + frame.type());
        }
        return wire;
    }

    void readTimeoutMs(int ms) throws IOException {
        socket.setSoTimeout(ms);
    }

    Frame call(int apiKey, int version, ApiMessage request) throws IOException {
        return call(apiKey, version, request.toByteArray());
    }

    synchronized Frame call(int apiKey, int version, byte[] body) throws IOException {
        int id = nextRequestId++;
        out.writeInt(8 + body.length);
        out.writeShort(apiKey);
        out.writeShort(version);
        out.writeInt(id);
        out.write(body);
        out.flush();
        int length = in.readInt();
        if (length < 5) {
            throw new IOException("response frame of " + length + " bytes from " + address);
        }
        int type = in.readByte();
        int responseId = in.readInt();
        byte[] responseBody = new byte[length - 5];
        in.readFully(responseBody);
        if (responseId != id) {
            throw new IOException(
                    "response id " + responseId + " for request id " + id + " from " + address);
        }
        return new Frame(type, responseBody);
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
