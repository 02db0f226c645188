// One JVM serving a job's stdio tests (sandbox/runner/languages/harness.py): per test, the
// candidate's classes in a fresh class loader (its statics start over), System.in/out/err of
// its own, main run as the launcher runs it (a thread named "main", the -Xss stack), then
// every non-daemon thread it started waited for, as the JVM waits before it exits. The JDK-wide
// settings a program can change without reflection are put back after each test (System
// properties, default locales and time zone, the default uncaught-exception handler); programs
// that reach other JDK-wide state are refused sharing by harness.py's scan of their classes.
//
// The supervisor judges; this only says "the test ended as a clean exit 0" with one line on
// stderr. Anything a fresh JVM would end otherwise (main threw, System.exit, a thread still
// alive, an uncaught exception anywhere) ends this JVM the way a fresh one ends, with its exit
// code, and the next test gets a fresh JVM. The line carries the test's secret (sent with its
// input, kept only in a local of main here: no field, no argument of the process); a
// candidate that read it anyway could end its own test early, which means no more than
// System.exit(0) at that point would.
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;
import java.util.TimeZone;

public final class VrHarness {
    private static final long STACK = 8L << 20;  // the launcher's main thread gets -Xss8m (table.JVM)

    /** An fd's stream that a candidate's close() only flushes (fd 1 and 2 serve every test). */
    private static final class Shield extends OutputStream {
        private final OutputStream out;
        private boolean closed;
        Shield(OutputStream out) { this.out = out; }
        @Override public void write(int b) throws IOException { if (closed) throw new IOException("Stream closed"); out.write(b); }
        @Override public void write(byte[] b, int off, int len) throws IOException {
            if (closed) throw new IOException("Stream closed");
            out.write(b, off, len);
        }
        @Override public void flush() throws IOException { out.flush(); }
        @Override public void close() { closed = true; }
    }

    /** The candidate's classes, read once, defined afresh in each test's loader. */
    private static final class Fresh extends ClassLoader {
        private final Map<String, byte[]> classes;
        Fresh(Map<String, byte[]> classes, ClassLoader parent) { super(parent); this.classes = classes; }
        @Override protected Class<?> findClass(String name) throws ClassNotFoundException {
            byte[] b = classes.get(name);
            if (b == null) throw new ClassNotFoundException(name);
            return defineClass(name, b, 0, b.length);
        }
    }

    private static void collect(File dir, String prefix, Map<String, byte[]> into) throws IOException {
        File[] files = dir.listFiles();
        if (files == null) return;
        for (File f : files) {
            String n = f.getName();
            if (f.isDirectory()) collect(f, prefix + n + ".", into);
            else if (n.endsWith(".class")) into.put(prefix + n.substring(0, n.length() - 6), Files.readAllBytes(f.toPath()));
        }
    }

    /** The test's thread group: an uncaught exception anywhere in it is remembered. */
    private static final class TestGroup extends ThreadGroup {
        volatile boolean uncaught;
        TestGroup() { super("main"); }
        @Override public void uncaughtException(Thread t, Throwable e) {
            uncaught = true;
            super.uncaughtException(t, e);
        }
    }

    private static final class Runner implements Runnable {
        private final ClassLoader loader;
        private final String main;
        volatile Throwable failure;
        Runner(ClassLoader loader, String main) { this.loader = loader; this.main = main; }
        @Override public void run() {
            try {
                Class<?> c = Class.forName(main, false, loader);
                Method m = c.getMethod("main", String[].class);
                m.setAccessible(true);  // a non-public class's main runs too, as the launcher runs it
                m.invoke(null, (Object) new String[0]);
            } catch (InvocationTargetException e) {
                failure = trim(e.getCause());
            } catch (Throwable e) {
                failure = e;
            }
            if (failure != null) sneaky(failure);  // uncaught in "main": printed as the JVM prints it
        }
    }

    /** The exception's trace without our frames below the candidate's main. */
    private static Throwable trim(Throwable e) {
        StackTraceElement[] st = e.getStackTrace();
        int n = st.length;
        while (n > 0 && !isCandidate(st[n - 1])) n--;
        if (n > 0 && n < st.length) e.setStackTrace(java.util.Arrays.copyOf(st, n));
        return e;
    }

    private static boolean isCandidate(StackTraceElement f) {
        String c = f.getClassName();
        return !(c.startsWith("VrHarness") || c.startsWith("java.lang.reflect.") || c.startsWith("jdk.internal.reflect.")
                 || c.equals("java.lang.Thread"));
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> void sneaky(Throwable e) throws T { throw (T) e; }

    private static String readLine(InputStream in) throws IOException {
        StringBuilder b = new StringBuilder();
        for (int ch = in.read(); ch != '\n'; ch = in.read()) {
            if (ch < 0) return null;
            b.append((char) ch);
        }
        return b.toString();
    }

    private static byte[] readFully(InputStream in, int n) throws IOException {
        byte[] data = new byte[n];
        for (int off = 0; off < n; ) {
            int k = in.read(data, off, n - off);
            if (k < 0) throw new IOException("stdin ended inside a test's input");
            off += k;
        }
        return data;
    }

    private static Thread[] threads() {
        ThreadGroup root = Thread.currentThread().getThreadGroup();
        while (root.getParent() != null) root = root.getParent();
        Thread[] all = new Thread[root.activeCount() + 16];
        int n = root.enumerate(all, true);
        return java.util.Arrays.copyOf(all, n);
    }

    /** As the JVM before it exits: until no non-daemon thread but ours is alive. */
    private static void awaitNonDaemon(Set<Thread> ours) throws InterruptedException {
        for (boolean again = true; again; ) {
            again = false;
            for (Thread t : threads()) {
                if (!ours.contains(t) && t.isAlive() && !t.isDaemon()) {
                    t.join();
                    again = true;
                }
            }
        }
    }

    private static boolean lingering(Set<Thread> ours) {
        for (Thread t : threads()) if (!ours.contains(t) && t.isAlive()) return true;
        return false;
    }

    public static void main(String[] args) throws Exception {
        Map<String, byte[]> classes = new HashMap<>();
        collect(new File(args[0]), "", classes);
        String mainClass = args[1];
        FileOutputStream rawOut = new FileOutputStream(FileDescriptor.out);
        FileOutputStream rawErr = new FileOutputStream(FileDescriptor.err);
        InputStream rawIn = new BufferedInputStream(new FileInputStream(FileDescriptor.in), 1 << 16);
        Properties props = (Properties) System.getProperties().clone();
        Locale locale = Locale.getDefault();
        Locale format = Locale.getDefault(Locale.Category.FORMAT);
        Locale display = Locale.getDefault(Locale.Category.DISPLAY);
        TimeZone zone = TimeZone.getDefault();
        ClassLoader parent = ClassLoader.getPlatformClassLoader();  // our classes are not the candidate's to see
        Set<Thread> ours = new HashSet<>(java.util.Arrays.asList(threads()));
        while (true) {
            String header = readLine(rawIn);
            if (header == null) Runtime.getRuntime().halt(0);
            String[] h = header.split(" ");
            byte[] input = readFully(rawIn, Integer.parseInt(h[1]));
            PrintStream out = new PrintStream(new BufferedOutputStream(new Shield(rawOut), 128), true);
            PrintStream err = new PrintStream(new BufferedOutputStream(new Shield(rawErr), 128), true);
            System.setIn(new BufferedInputStream(new ByteArrayInputStream(input)));
            System.setOut(out);
            System.setErr(err);
            Fresh loader = new Fresh(classes, parent);
            TestGroup group = new TestGroup();
            Runner runner = new Runner(loader, mainClass);
            Thread t = new Thread(group, runner, "main", STACK);
            t.setContextClassLoader(loader);
            t.start();
            t.join();
            awaitNonDaemon(ours);
            out.flush();
            err.flush();
            if (runner.failure != null) System.exit(1);  // as the launcher: main threw
            if (group.uncaught || lingering(ours)) System.exit(0);  // state a fresh JVM would not have
            System.setProperties((Properties) props.clone());
            Locale.setDefault(locale);
            Locale.setDefault(Locale.Category.FORMAT, format);
            Locale.setDefault(Locale.Category.DISPLAY, display);
            TimeZone.setDefault(zone);
            Thread.setDefaultUncaughtExceptionHandler(null);
            rawErr.write(("\u001evr:" + h[0] + "\n").getBytes(StandardCharsets.ISO_8859_1));
            rawErr.flush();
        }
    }
}
