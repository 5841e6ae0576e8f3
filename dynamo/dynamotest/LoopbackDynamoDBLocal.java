import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * Runs DynamoDB Local like its own main class does, but listening on 127.0.0.1 only: the jar
 * has no option for the address and otherwise binds every interface. It also exits when its
 * standard input reaches end of file: the Go process that started it holds the only write
 * end, so a test binary that dies without stopping it (a timeout, a kill) takes it along.
 * Package dynamotest runs this file with Java's source launcher
 * (java -cp DynamoDBLocal.jar LoopbackDynamoDBLocal.java [DynamoDB Local options]).
 */
public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        Thread watch = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // nothing is ever written; wait for end of file
                }
            } catch (java.io.IOException e) {
                // a broken pipe means the parent is gone too
            }
            System.exit(0);
        }, "parent-watch");
        watch.setDaemon(true);
        watch.start();

        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector c : server.getConnectors()) {
            ((ServerConnector) c).setHost("127.0.0.1");
        }
        proxy.start();
        proxy.join();
    }
}
